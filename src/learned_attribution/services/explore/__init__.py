"""The explorer's services: a fold's examples to browse (`fold_view`), the writable workspace of annotations and
refits (`workspace`) and the one object the web adapter calls (`explorer.Explorer`)."""
