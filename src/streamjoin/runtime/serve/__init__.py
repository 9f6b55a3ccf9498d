"""A served job: queries added and dropped while its streams run (`streamjoin serve`)."""
