"""Everything the images run, one sub-package per runtime role.

- `contract`: what every role shares: the cluster template and TF_CONFIG, exit codes, the results
  directory, the start gate, the shaper's report, console output and the settings machinery.
  Standard library only; it imports no role.
- `training`: the training program (`python -m trainer.training`). It imports TensorFlow, and only
  after its settings are validated.
- `launcher`: each worker's PID 1 (`python -m trainer.launcher`): rendezvous, supervision, deadlines.
- `keeper`: restarts the whole cluster after a failure (`python -m trainer.keeper`, Docker SDK).
- `verifier`: waits for the workers and judges the run (`python -m trainer.verifier`).
- `benchmark`: programs the benchmark runs in place of the trainer (`python -m trainer.benchmark.allreduce`).
- `shaper`: the network shaper beside each worker (`python -m trainer.shaper`, its own image).
- `reporting`: for users' own programs: the final-metrics line in one call or one Keras callback.
- `observer`: loaded into every training program by the image (as `_tfcluster_observer`), it records
  the program's strategy and its model's state at each epoch, checkpoint and end, for the verifier's
  check that every worker trained the same weights. It imports nothing of this project's.

The rule between them is checked by `lint-imports` (the contracts in pyproject.toml, run by
scripts/lint): the contract imports no role; the roles import no other role; the launcher, the
keeper, the verifier and the shaper never import TensorFlow; the observer imports not even the contract.
Importing this package imports nothing.
"""
