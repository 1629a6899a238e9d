"""The deterministic explorer: every interleaving of the real consumer at small bounds (``make verify``)."""
