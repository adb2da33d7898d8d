"""RL for the world model: GSPO on TRL with the hybrid reward (training/rewards/hybrid.py).

    python -m training.rl --corpus OUT --base SFT_CHECKPOINT --out RUN [--judge-url URL | --reward rules]

samples.py picks one turn per trajectory from the RL corpus, rewards.py adapts the hybrid reward to TRL's
reward functions, trainer.py builds the GRPOTrainer run (GSPO, KL control, checkpoints, resume).
"""
