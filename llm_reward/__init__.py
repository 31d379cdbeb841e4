"""rewardlab: llm_reward."""
