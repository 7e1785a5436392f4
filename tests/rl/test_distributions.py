import math

import pytest
import torch

from hetsched.rl import FactoredCategorical, MaskedCategorical


def test_masked_actions_have_zero_probability_and_are_never_sampled():
    torch.manual_seed(0)
    logits = torch.tensor([[5.0, 0.0, 0.0, 0.0]]).repeat(500, 1)
    mask = torch.tensor([[False, True, True, False]]).repeat(500, 1)
    dist = MaskedCategorical(logits, mask)
    assert torch.all(dist.log_probs[:, 0].exp() == 0)
    assert torch.allclose(dist.log_probs[:, 1].exp(), torch.full((500,), 0.5))
    samples = dist.sample()
    assert set(samples.tolist()) == {1, 2}
    assert torch.isfinite(dist.entropy()).all()
    assert torch.allclose(dist.entropy(), torch.full((500,), math.log(2)))


def test_a_row_without_valid_action_is_rejected():
    with pytest.raises(ValueError, match="at least one valid action"):
        MaskedCategorical(torch.zeros(2, 3), torch.tensor([[True, False, False], [False] * 3]))


def test_epsilon_mixture_log_likelihood_is_the_mixture_of_eq5():
    logits = torch.tensor([[2.0, 0.5, -1.0, 0.0], [0.0, 1.0, 3.0, 0.0]])
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    eps = torch.tensor([0.3, 0.1])
    dist = MaskedCategorical(logits, mask, eps)
    assert dist.log_prob(torch.tensor([0, 2])).shape == (2,)
    for row in range(2):
        valid = mask[row]
        pi = torch.softmax(logits[row].masked_fill(~valid, -1e9), -1)
        expected = (1 - eps[row]) * pi + eps[row] * valid.float() / valid.sum()
        actions = torch.arange(4)
        rows = MaskedCategorical(logits[row : row + 1].repeat(4, 1), valid.repeat(4, 1), eps[row])
        assert torch.allclose(rows.log_prob(actions).exp(), expected, atol=1e-6)
    # entropy is that of the learned policy, not the mixture (eq. 12)
    plain = MaskedCategorical(logits, mask)
    assert torch.allclose(dist.entropy(), plain.entropy())


def test_epsilon_zero_gives_the_plain_categorical_exactly():
    logits = torch.randn(5, 3)
    actions = torch.tensor([0, 1, 2, 1, 0])
    mixed = MaskedCategorical(logits, epsilon=0.0).log_prob(actions)
    plain = torch.distributions.Categorical(logits=logits).log_prob(actions)
    assert torch.allclose(mixed, plain, atol=1e-6)


def test_epsilon_one_is_uniform_over_valid_actions():
    mask = torch.tensor([[True, False, True]])
    dist = MaskedCategorical(torch.tensor([[9.0, 0.0, -9.0]]), mask, 1.0)
    assert torch.allclose(dist.log_probs.exp(), torch.tensor([[0.5, 0.0, 0.5]]))


def test_factored_heads_shapes_joint_log_prob_and_masks():
    torch.manual_seed(0)
    sizes = (3, 4, 2)
    logits = torch.randn(6, sum(sizes))
    mask = torch.ones(6, sum(sizes), dtype=torch.bool)
    mask[:, 3 + 0] = False  # width choice 0 invalid everywhere
    dist = FactoredCategorical(logits, sizes, mask, epsilon=0.2, epsilon_heads=(0,))
    action = dist.sample()
    assert action.shape == (6, 3)
    assert (action[:, 1] != 0).all()
    joint = dist.log_prob(action)
    parts = [dist.heads[k].log_prob(action[:, k]) for k in range(3)]
    assert torch.allclose(joint, parts[0] + parts[1] + parts[2])
    # only head 0 is mixed: heads 1 and 2 equal the plain masked categoricals
    plain_width = MaskedCategorical(logits[:, 3:7], mask[:, 3:7])
    assert torch.allclose(parts[1], plain_width.log_prob(action[:, 1]))
    assert not torch.allclose(parts[0], MaskedCategorical(logits[:, :3]).log_prob(action[:, 0]))
    assert dist.entropy().shape == (6,)
    assert dist.mode().shape == (6, 3) and (dist.mode()[:, 1] != 0).all()  # greedy respects masks
    with pytest.raises(ValueError, match="heads need 9"):
        FactoredCategorical(torch.zeros(1, 8), sizes)
