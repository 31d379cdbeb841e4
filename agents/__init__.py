"""rewardlab: agents."""
