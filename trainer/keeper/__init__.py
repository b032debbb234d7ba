"""The keeper: restarts the whole cluster after a failure (`python -m trainer.keeper`)."""
