"""Where images meet the text model: the processor as a trace runs it (`processing`,
`options`, `inputs`, `invokes`), where each image token sits (`geometry`), and the entry
each way an image reaches the text model declares (`entries`)."""
