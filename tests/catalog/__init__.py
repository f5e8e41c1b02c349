"""Tests of the catalog: the DLC image matrix, request shapes."""
