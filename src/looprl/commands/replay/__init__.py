"""`looprl replay`: the command (`command`), the recorded model replies it serves (`recorded_replies`) and
`--pdb` (`post_mortem`)."""
