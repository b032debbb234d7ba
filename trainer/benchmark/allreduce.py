"""All-reduce throughput between the workers: `python -m trainer.benchmark.allreduce [MiB ...]`.

The benchmark (scripts/tfcluster/benchmark/) runs this in place of the trainer, in the Compose cluster
and as bare processes, to compare what the network between containers costs the collectives the
training depends on. Each worker prints one JSON line per size:

  {"event": "allreduce", "worker": 0, "workers": 2, "mib": 16, "rounds": 10, "seconds": [...],
   "mb_per_s": 412.3}

`mb_per_s` is the tensor's size (10^6 bytes) over the median time of one all-reduce, each
replica contributing that whole tensor (the "algorithm bandwidth" of NCCL's tests).
"""

import json
import os
import statistics
import sys
import time

from trainer.contract import cluster as cluster_config
from trainer.contract import gate
from trainer.contract.console import config_error
from trainer.contract.exitcodes import ExitCode

DEFAULT_SIZES_MIB = (1, 16, 64)
# Enough rounds for a stable median without making the 64 MiB case the whole benchmark.
ROUNDS = {1: 100, 16: 20, 64: 8}


def rounds_for(mib: int) -> int:
    return ROUNDS.get(mib, max(3, 64 // mib))


def main(argv: list[str]) -> int:
    try:
        for word in argv:
            if not word.isdigit() or int(word) < 1:
                raise ValueError(f"a size must be a whole number of MiB, at least 1, got {word!r}")
        sizes = [int(word) for word in argv] or list(DEFAULT_SIZES_MIB)
        cluster = cluster_config.from_env(os.environ)
    except ValueError as error:
        return config_error("allreduce", str(error))
    cluster_config.export_for_tensorflow(cluster, os.environ)

    import tensorflow as tf  # Seconds: only after the arguments are known to be good.

    if not gate.wait_for_go():  # The launcher's rendezvous failed while TensorFlow was importing.
        return ExitCode.TERMINATED

    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    for mib in sizes:
        elements = mib * 1024 * 1024 // 4

        # As the gradients are in training: made on the replica, summed across the workers there.
        @tf.function
        def all_reduce(elements=elements):
            def replica():
                value = tf.fill([elements], 1.0)
                return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, value)

            return strategy.run(replica)

        total = float(all_reduce()[0])  # Warm-up: traces the function and sets up the collective.
        if total != float(cluster.size):
            print(f"allreduce: wrong sum {total}, expected {cluster.size}", file=sys.stderr, flush=True)
            return ExitCode.TRAINING_CHECK_FAILED
        seconds = []
        for _ in range(rounds_for(mib)):
            started = time.perf_counter()
            all_reduce()[0].numpy()  # .numpy() waits for the collective to finish.
            seconds.append(time.perf_counter() - started)
        median = statistics.median(seconds)
        line = {
            "event": "allreduce",
            "worker": cluster.index,
            "workers": cluster.size,
            "mib": mib,
            "rounds": len(seconds),
            "seconds": [round(value, 6) for value in seconds],
            "mb_per_s": round(mib * 1024 * 1024 / 1e6 / median, 1),
        }
        print(json.dumps(line), flush=True)
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
