"""Your training project (scripts/run --project): its options, env files, requirements, command and baking."""
