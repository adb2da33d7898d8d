"""An agent trained with GRPO inside the simulator, then tried in the real sandbox (issue 38, item 3).

`python -m training.agent_rl`: a small chat model plays whole episodes of terminal tasks against the
world model's simulated sandbox (training.simulator), is trained on the simulated verifier's rewards
with TRL's GRPOTrainer (its `rollout_func`: multi-turn episodes whose observation tokens are masked
out of the loss), and is run before and after on the same tasks in real bubblewrap terminals with
the real verifier; the report is the real reward's paired difference with a bootstrap interval.
"""
