"""flows"""
