"""The job store contract on Redis Streams (XREADGROUP, XACK, XAUTOCLAIM).

``streams`` the plain stream queue lesson 13 starts from, ``store`` the job store on
it, ``lua`` their atomic steps.
"""
