"""Bad input, refused before anything starts: one line that names the bad value and says why."""


class Refusal(Exception):
    """Bad input: the one line that says what and why (a command prefixes it with its name, `run: `)."""
