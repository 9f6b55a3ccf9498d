"""streamjoin's Java classes: the join operator (``operator/``), the engine loop's scan and
progress figures (``loop/``) and the local file system (``localfs/``), built into one jar
(`jar.build_jar`) and called through py4j (`statics.StaticMethods`)."""
