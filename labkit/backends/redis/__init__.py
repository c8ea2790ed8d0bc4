"""The job store contract on Redis Streams (XREADGROUP, XACK, XAUTOCLAIM).

``streams`` the plain stream queue lesson 13 starts from, ``store`` the job store on
it (the worker's side), ``admin`` its operator's side (reads, dead letters, redrive),
``lua`` their atomic steps, ``malformed`` the entries set aside so the stream goes on.
"""
