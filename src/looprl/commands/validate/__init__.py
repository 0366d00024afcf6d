"""`looprl validate`: the command (`command`) and the contract checks it lists (`contract_checks`)."""
