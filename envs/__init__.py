"""rewardlab: batched environments in torch."""
