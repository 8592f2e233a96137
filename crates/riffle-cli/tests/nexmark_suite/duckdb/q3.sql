SELECT P.name, P.city, P.state, A.id
FROM auction A JOIN person P ON A.seller = P.id
WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')
