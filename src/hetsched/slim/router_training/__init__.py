"""Training Slim routers: the Gymnasium environment (registered as ``hetsched/SlimRouting-v0``),
the paper's PPO loop, and the learned router's behaviour cloning and PPO fine-tuning over a
randomised mix of scenarios."""

from hetsched.slim.router_training.gym_registration import ENV_ID, register_routing_env

register_routing_env()

__all__ = ["ENV_ID", "register_routing_env"]
