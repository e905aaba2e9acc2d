"""What the MiniCPM-V wrappers refuse."""

#: A video's frames run through the tower (and the projector) in a call of their own, after
#: the images'; its mask and features are served at the second scatter.
VIDEOS = (
    "a video's mask and features are served (vision.video_token_mask, vision.video_features), but the "
    "tower's values are the images' call's: a video's frames run through the tower in a call of their own, "
    "which no standard value reads; pass the frames as images=[...] to read the tower on them"
)

REFUSES = {"videos": VIDEOS}
