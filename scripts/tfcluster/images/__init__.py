"""The set-up's logic (scripts/setup): the pins file and the digest of what an image is built from."""
