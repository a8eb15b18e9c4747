"""The explorer in the browser (`learned-attribution explore`): the web app (`app.py`) and its server (`server.py`)."""
