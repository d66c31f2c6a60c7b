"""Two-phase SFT -> GRPO fine-tuning pipeline for math reasoning."""
