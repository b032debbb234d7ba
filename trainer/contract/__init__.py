"""The contract every role shares (standard library only; imports no role)."""
