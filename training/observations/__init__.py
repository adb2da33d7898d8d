"""Reading observation text back into structure: each domain's parsers (`parsers`, `trees`), the
character-class form of volatile values (`shapes`) and a real observation's stable/volatile template
(`template`). Shared by the rule verifiers (training/rewards), the fidelity metrics
(training/fidelity) and the simulator, so all three read a text the same way. A leaf: it imports
`schemas` and `sandboxes` only, never another part of `training`."""
