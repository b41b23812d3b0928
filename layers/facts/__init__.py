"""What only reads and parses cluster facts: objects, pod status, placement, GPU facts, log signatures.

The layer modules above (scheduling, runtime, versions, memory, card) hold the rules; these hold no rule.
"""
