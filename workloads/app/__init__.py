"""The app factory and the processes it makes: the worker and the driver."""
