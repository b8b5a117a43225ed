"""The ASGI app gunicorn serves: `gunicorn -k uvicorn_worker.UvicornWorker wsgi:app`."""

from app import create_app

app = create_app()
