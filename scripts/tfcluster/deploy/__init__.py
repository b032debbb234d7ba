"""The cluster for other orchestrators: the same image and TF_CONFIG template as a Swarm stack or a Kubernetes Job."""
