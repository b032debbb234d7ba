"""A warm worker's main process: TensorFlow imported once, a fresh child forked for every run.

Importing TensorFlow from the image takes about 4 s here (fuse-overlayfs; docs/performance.md),
most of a short run. A zygote pays it once per container: it imports TensorFlow and Keras
(`tf.keras` touched, or its lazy loader would defer Keras to the child), then serves its launchers
(trainer/contract/zygote.py). For each run it forks a child that becomes the program as `python`
would have started it (trainer/zygote/child.py), with the run's environment, working directory and
descriptors, in a process group of its own; the launcher supervises it as it would its own child.

Safe by construction:
- it imports only the image's Python and its site-packages (`python -P`, from /), never a
  project's code, and a child forgets every module from elsewhere: an edit always takes effect;
- it never runs a TensorFlow op: forking after TensorFlow's runtime has started (its thread pools,
  a session) is known to hang (tensorflow/tensorflow#8220, #51832, #13802). It checks, after its
  imports, that the eager context was never initialized and that each of its threads is one known
  to be idle (trainer/zygote/threads.py); otherwise every run is started cold, saying why;
- a run whose key (what Python and TensorFlow read once at start-up) differs from its own makes it
  restart under the run's key first (trainer/contract/zygote.py, `key_of`);
- a child's failure is the child's: a crash, a stall or SIGKILL leave the zygote as it was; a
  launcher that goes away takes its child with it.
"""
