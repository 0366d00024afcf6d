"""`looprl rescore`: the command (`command`) and the re-scoring of stored groups it reports on (`rescoring`)."""
