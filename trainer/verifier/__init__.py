"""The verifier: did every worker finish the same synchronized training? (`python -m trainer.verifier`)."""
