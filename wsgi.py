"""The ASGI app gunicorn serves: `gunicorn -k uvicorn_worker.UvicornWorker wsgi:app`."""

from app.web import create_app

app = create_app()
