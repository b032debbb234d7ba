"""The cluster run: a plan of steps that the run executes and the dry run prints, over one Compose driver."""
