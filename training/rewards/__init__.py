"""Rewards for a world model's predictions, shared by fidelity, reasoning synthesis and RL: the binary
rule verifiers per domain (`verifiers`) and the LLM judge, ours or the public AgentWorldBench one
(`judge`, `public_judge`)."""
