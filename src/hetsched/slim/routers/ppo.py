"""The PPO router (Slim Scheduler section III.B): eq. (1) state, factored heads, checkpoints.

The policy network is :class:`hetsched.rl.FactoredActorCritic`: one shared MLP giving the logits of
the server, width and group heads and a value (eqs. 2-4). Training (ε-mixed server head, one-step
returns, clipped PPO: eqs. 5-13) happens in :mod:`hetsched.slim.router_training.trainer` through
:func:`hetsched.rl.train`; this module turns a :class:`RouterState` into the network's input and a
sampled action back into a :class:`RoutingDecision`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import torch

from hetsched.core.errors import DataError
from hetsched.core.seeding import make_rng
from hetsched.rl import FactoredActorCritic
from hetsched.slim.routers.base import ROUTERS, Router, RouterState, RoutingDecision
from hetsched.slim.routers.slo_features import OBS_CLIP, AdviceEncoder, SloEncoder


class RouterEncoder(Protocol):
    """What the policy network, the environment and checkpoints need of a state encoder: the
    paper's eq. (1) (:class:`StateEncoder`) or the extended one
    (:class:`~hetsched.slim.routers.slo_features.SloEncoder`), with the joint placement head or
    the advisor-choice head (:class:`~hetsched.slim.routers.slo_features.AdviceEncoder`)."""

    kind: str
    obs_low: float

    @property
    def n_servers(self) -> int:
        """Servers the router is built for (at most, for the padded extended encoder)."""

    @property
    def widths(self) -> tuple[float, ...]: ...

    @property
    def group_sizes(self) -> tuple[int, ...]: ...

    @property
    def obs_dim(self) -> int: ...

    @property
    def head_sizes(self) -> tuple[int, ...]: ...

    def settings(self) -> dict[str, object]: ...

    def encode(self, state: RouterState) -> np.ndarray: ...

    def mask(self, state: RouterState) -> np.ndarray: ...

    def action(self, decision: RoutingDecision) -> np.ndarray: ...

    def imitation(self, rule: str, decision: RoutingDecision) -> np.ndarray: ...

    def decision(self, action: np.ndarray) -> RoutingDecision: ...


@dataclass(frozen=True)
class StateEncoder:
    """Builds the normalised state vector of Slim eq. (1) and the action mask.

    s_t = [q^fifo, c^done, (q^(i), P^(i), U^(i)) for each server i], normalised as
    queue lengths → log(1 + q) / log(1 + queue_scale) (heavy bursts stay in range), c^done → the
    fraction of arrived images completed, P → P / P_max, U → U / 100; all clipped to [0, OBS_CLIP].

    Args:
        n_servers: N.
        widths: The width choices (action head 2).
        group_sizes: The group-size choices (action head 3).
        queue_scale: The queue length that maps to 1.0.
    """

    n_servers: int
    widths: tuple[float, ...]
    group_sizes: tuple[int, ...]
    queue_scale: float = 64.0

    kind = "paper"
    """Checkpoint tag of this encoder."""
    obs_low = 0.0
    """Lower bound of every observation entry (the space is [0, OBS_CLIP])."""

    def settings(self) -> dict[str, object]:
        """The constructor's arguments, for a checkpoint."""
        return {
            "n_servers": self.n_servers,
            "widths": list(self.widths),
            "group_sizes": list(self.group_sizes),
            "queue_scale": self.queue_scale,
        }

    @property
    def obs_dim(self) -> int:
        """2 global entries + 3 per server."""
        return 2 + 3 * self.n_servers

    @property
    def head_sizes(self) -> tuple[int, int, int]:
        """(servers, widths, group sizes): the factored action of eq. (2)."""
        return (self.n_servers, len(self.widths), len(self.group_sizes))

    def encode(self, state: RouterState) -> np.ndarray:
        """The eq. (1) vector for ``state`` as float32."""
        if len(state.servers) != self.n_servers:
            raise ValueError(f"state has {len(state.servers)} servers, router {self.n_servers}")
        log_scale = math.log1p(self.queue_scale)
        values = [
            math.log1p(state.fifo_length) / log_scale,
            state.completed / max(1, state.arrived),
        ]
        for server in state.servers:
            values += [
                math.log1p(server.queue_length) / log_scale,
                server.power_w / server.max_power_w,
                server.utilization_pct / 100.0,
            ]
        return np.clip(np.asarray(values, dtype=np.float32), 0.0, OBS_CLIP)

    def mask(self, state: RouterState) -> np.ndarray:
        """Valid actions: unavailable servers are masked; every width and group size is valid."""
        servers = [server.available for server in state.servers]
        if not any(servers):
            servers = [True] * self.n_servers
        return np.asarray(servers + [True] * (len(self.widths) + len(self.group_sizes)), dtype=bool)

    def action(self, decision: RoutingDecision) -> np.ndarray:
        """The action indices (server, width index, group index) of ``decision``."""
        return np.asarray(
            [
                decision.server,
                self.widths.index(decision.width),
                self.group_sizes.index(decision.group_size),
            ],
            dtype=np.int64,
        )

    def imitation(self, rule: str, decision: RoutingDecision) -> np.ndarray:
        """The action that imitates ``decision`` of the registered ``rule`` (:meth:`action`)."""
        return self.action(decision)

    def decision(self, action: np.ndarray) -> RoutingDecision:
        """Maps action indices (server, width index, group index) to a decision."""
        server, width_index, group_index = (int(a) for a in action)
        return RoutingDecision(server, self.widths[width_index], self.group_sizes[group_index])


def encoder_from_settings(kind: str, fields: dict[str, Any]) -> RouterEncoder:
    """Rebuilds an encoder from its checkpoint tag and :meth:`settings`."""
    widths = tuple(float(w) for w in fields["widths"])
    groups = tuple(int(g) for g in fields["group_sizes"])
    if kind == "paper":
        return StateEncoder(int(fields["n_servers"]), widths, groups, float(fields["queue_scale"]))
    if kind in ("slo", "advice"):
        extended = SloEncoder if kind == "slo" else AdviceEncoder
        return extended(
            int(fields["max_servers"]),
            widths,
            groups,
            tuple(str(a) for a in fields["advisors"]),
            float(fields["time_scale_s"]),
            float(fields["queue_scale"]),
            int(fields["num_segments"]),
        )
    raise ValueError(f"unknown encoder kind {kind!r}")


def new_policy(
    encoder: RouterEncoder, hidden_sizes: tuple[int, ...] = (64, 64)
) -> FactoredActorCritic:
    """A fresh router network for ``encoder``; ε-mixing applies to the first head (eq. 5: the
    server head, or the joint server-width head of the extended encoder)."""
    return FactoredActorCritic(
        encoder.obs_dim, encoder.head_sizes, hidden_sizes, epsilon_heads=(0,)
    )


def save_router(
    path: str | Path,
    policy: FactoredActorCritic,
    encoder: RouterEncoder,
    hidden_sizes: tuple[int, ...],
    metadata: dict[str, Any] | None = None,
) -> None:
    """Writes a checkpoint that :class:`PPORouter` can load on its own (a state dict and plain
    settings: it loads with ``weights_only=True``)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "state_dict": policy.state_dict(),
            "encoder_kind": encoder.kind,
            "encoder": encoder.settings(),
            "hidden_sizes": list(hidden_sizes),
            "metadata": metadata or {},
        },
        path,
    )


def load_router_checkpoint(
    path: str | Path,
) -> tuple[FactoredActorCritic, RouterEncoder, dict]:
    """Reads a checkpoint written by :func:`save_router`.

    Raises:
        DataError: If the file is missing or not a router checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError("router checkpoint not found", path=str(path))
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a corrupt or foreign file
        raise DataError(
            f"not a router checkpoint (unreadable: {type(error).__name__})", path=str(path)
        ) from None
    if not isinstance(data, dict):
        raise DataError("not a router checkpoint (no settings mapping)", path=str(path))
    try:
        encoder = encoder_from_settings(data.get("encoder_kind", "paper"), data["encoder"])
        policy = new_policy(encoder, tuple(data["hidden_sizes"]))
        policy.load_state_dict(data["state_dict"])
        metadata = dict(data.get("metadata", {}))
    except (KeyError, RuntimeError, TypeError, ValueError, AttributeError) as error:
        raise DataError(f"not a router checkpoint: {error}", path=str(path)) from None
    return policy, encoder, metadata


SHIPPED_FOLDER = "trained"
"""Folder of :mod:`hetsched.slim.routers` holding the routers trained for the package (each
with its data card, ``README.md``: command, commit and validation scores)."""


def shipped_checkpoint(file_name: str) -> Path:
    """Path of a router checkpoint shipped inside the package."""
    resource = resources.files("hetsched.slim.routers").joinpath(SHIPPED_FOLDER, file_name)
    return Path(str(resource))


@ROUTERS.register("ppo")
class PPORouter(Router):
    """Routes with a trained PPO policy.

    Args:
        checkpoint: A file written by :func:`save_router` (or pass ``policy`` and ``encoder``;
            with neither, the class's :attr:`shipped` checkpoint if it has one).
        seed: Seeds the action sampling.
        greedy: Take each head's most likely action instead of sampling.
        policy, encoder: An in-memory policy (used right after training).
        group_size: Accepted for a uniform registry signature; the policy chooses g itself.
    """

    shipped: ClassVar[str | None] = None
    """File name of the checkpoint shipped in :data:`SHIPPED_FOLDER` that the router loads when
    given neither a checkpoint nor a policy (None: the paper's PPO routers are trained per
    experiment, so none is shipped)."""

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        *,
        seed: int = 0,
        greedy: bool = False,
        policy: FactoredActorCritic | None = None,
        encoder: RouterEncoder | None = None,
        group_size: int | None = None,
    ) -> None:
        if checkpoint is None and policy is None and self.shipped is not None:
            checkpoint = shipped_checkpoint(self.shipped)
        if checkpoint is not None:
            policy, encoder, self.metadata = load_router_checkpoint(checkpoint)
        elif policy is None or encoder is None:
            raise ValueError("PPORouter needs a checkpoint, or both a policy and an encoder")
        else:
            self.metadata = {}
        if group_size is not None and group_size not in encoder.group_sizes:
            raise ValueError(f"group size {group_size} is not one of {encoder.group_sizes}")
        self.policy = policy.eval()
        self.encoder = encoder
        self.greedy = greedy
        self._rng = make_rng(seed)

    def decide(self, state: RouterState) -> RoutingDecision:
        """State build (eq. 1) → forward (eq. 3) → one draw per head (eq. 4).

        The forward runs in NumPy on the policy's live weights and the masked draws in plain
        Python: each head has a handful of choices, where torch distributions or NumPy calls cost
        more in dispatch than in arithmetic (a decision stays well under 0.1 ms).
        """
        logits = self.policy.logits_numpy(self.encoder.encode(state)).tolist()
        mask = self.encoder.mask(state).tolist()
        action, start = [], 0
        for size in self.encoder.head_sizes:
            valid = [i for i in range(start, start + size) if mask[i]]
            action.append(self._choose(valid, logits) - start)
            start += size
        return self.encoder.decision(np.asarray(action))

    def _choose(self, valid: list[int], logits: list[float]) -> int:
        """One categorical draw (or the argmax when greedy) over the ``valid`` logit indices."""
        if self.greedy:
            return max(valid, key=logits.__getitem__)
        top = max(logits[i] for i in valid)
        weights = [math.exp(logits[i] - top) for i in valid]
        draw = self._rng.random() * sum(weights)
        for index, weight in zip(valid, weights, strict=True):
            draw -= weight
            if draw < 0:
                return index
        return valid[-1]  # rounding left the draw at the very top


@ROUTERS.register("learned")
class LearnedRouter(PPORouter):
    """The router ``hetsched slim train-router`` trains (cloning of the rules and DAgger,
    optionally PPO fine-tuning): a :class:`PPORouter` that takes each head's most likely action
    unless told to sample, since its checkpoint is the policy that scored best when acting
    greedily.

    Without a checkpoint or a policy it loads the router shipped with the package (trained with
    ``hetsched slim train-router --seed 1``; its data card says at which commit and why that
    seed), so ``--routers learned`` works on a fresh install and the published figures can be
    rerun.

    Args:
        checkpoint: ``learned.pt`` written by the training (or pass ``policy`` and ``encoder``).
        seed: Seeds the action sampling (with ``greedy=False``).
        greedy: Most likely action per head (default) or a draw from the policy.
        policy, encoder: An in-memory policy.
        group_size: Accepted for a uniform registry signature; the policy chooses g itself.
    """

    shipped = "learned-seed1.pt"

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        *,
        seed: int = 0,
        greedy: bool = True,
        policy: FactoredActorCritic | None = None,
        encoder: RouterEncoder | None = None,
        group_size: int | None = None,
    ) -> None:
        super().__init__(
            checkpoint,
            seed=seed,
            greedy=greedy,
            policy=policy,
            encoder=encoder,
            group_size=group_size,
        )
