"""What needs Jupyter (the ``[lab]`` extra): the screens, the plots, the lab's server.

``dead_letters`` and ``fault_panel`` are the two ipywidgets screens; ``timelines`` draws
attempts, crashes and the crash matrix with matplotlib; ``scratch`` gives a lesson a
fixed folder for its files; ``server`` starts JupyterLab for ``make lab``; ``refresh``
re-executes a lesson from its paired ``.py``. ``nbval_kernels`` is the pytest plugin that gives
``make check``'s kernels Unix sockets of their own. Nothing below this package imports it.
"""
