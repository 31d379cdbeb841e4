"""rewardlab: potential-based reward shaping."""
