"""CI: the verdict as JUnit XML, and bind mounts seen from inside a job container."""
