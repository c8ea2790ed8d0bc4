"""Lesson 12's request-reply service over real HTTP, its server launcher, its example job."""
