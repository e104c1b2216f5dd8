package destinations

// DirectoryResource is the name under which the serving process publishes
// the tenants' destinations, a *Directory, to the sinks that deliver to
// them (sink.Env.Resources). A sink type that looks it up (its registry
// definition lists it) is one that delivers to destinations: that, not
// its type's name, is how the configuration tells which sinks those are.
const DirectoryResource = "destinations.directory"
