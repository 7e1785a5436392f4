"""Training the PPO router: the Gymnasium environment over the cluster and the training loop
with the paper's PPO settings."""
