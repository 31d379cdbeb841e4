"""rewardlab: intrinsic."""
