"""What gpubot does to a cluster or for a person: must-gather bundles, redaction, cordon."""
