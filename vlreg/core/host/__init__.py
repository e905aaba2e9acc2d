"""The plugin host: the hooks (`hookspecs`), the declarations plugins make (`parts`,
`declaration`), the registry (`plugins`) and the family that serves a checkpoint (`family`)."""
