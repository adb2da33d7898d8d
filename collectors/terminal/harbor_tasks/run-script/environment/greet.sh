#!/bin/bash
name="$2"
echo "Hello, $name"
