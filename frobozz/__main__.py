from frobozz.cli import main

main()
