"""pstrain-launch: start a parameter-server cluster (ps, workers, evaluator) from a config."""
